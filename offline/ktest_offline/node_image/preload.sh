#!/bin/sh
# Runs once in the container ktest commits as a node image: imports the component images into
# the node's containerd, then cleans up. (containerd 1.6 has no pinned images: a kubelet under
# disk pressure could garbage-collect unused ones, which cannot be pulled again offline.)
set -eu
pause_image=$1
sed -i "s|sandbox_image = .*|sandbox_image = \"$pause_image\"|" /etc/containerd/config.toml
grep -q "sandbox_image = \"$pause_image\"" /etc/containerd/config.toml
containerd >/tmp/ktest-containerd.log 2>&1 &
containerd_pid=$!
tries=0
until ctr version >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -gt 300 ] || ! kill -0 "$containerd_pid" 2>/dev/null; then
    echo "containerd did not start:" >&2
    tail -n 20 /tmp/ktest-containerd.log >&2
    exit 1
  fi
  sleep 0.1
done
for archive in /kind/images/*.tar; do
  echo "importing $(basename "$archive" .tar)"
  ctr --namespace=k8s.io images import --all-platforms --no-unpack --digests "$archive" >/dev/null
done
ctr --namespace=k8s.io images list --quiet
kill "$containerd_pid"
wait "$containerd_pid" || true
rm -rf /kind/images /kind/ktest-preload.sh /tmp/ktest-containerd.log /var/lib/containerd/tmpmounts
