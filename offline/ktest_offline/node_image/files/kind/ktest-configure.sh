#!/bin/sh
# Runs once while ktest builds a node base image (a `RUN` step over the Debian root filesystem):
# the systemd clean-up of kind's base Dockerfile, adapted to Debian's paths.
set -eu

chmod 755 /kind /kind/bin
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>/etc/systemd/journald.conf
ln -sf /usr/lib/systemd/systemd /sbin/init

# kind's units expect containerd and CNI plugins where its own image puts them.
for binary in containerd ctr containerd-shim-runc-v2; do
  ln -sf "/usr/bin/$binary" "/usr/local/bin/$binary"
done
mkdir -p /opt/cni
ln -sfn /usr/lib/cni /opt/cni/bin

systemctl enable kubelet.service containerd.service undo-mount-hacks.service ktest-cni.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests /etc/cni/net.d

ctr oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json
# The node lacks the capabilities its container was not given (e.g. CAP_SYS_RESOURCE): containerd
# must not try to lower pods' oom_score_adj below its own.
sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml
grep -q 'restrict_oom_score_adj = true' /etc/containerd/config.toml

rm -f /kind/ktest-configure.sh
