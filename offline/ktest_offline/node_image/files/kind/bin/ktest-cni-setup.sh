#!/bin/sh
# ktest's pod network for kind nodes (kind's kindnetd image cannot be had offline).
# Each node gets the pod range 10.244.<last octet of its eth0 IPv4>.0/24 on a bridge, and a
# route to every other node's range via that node (all nodes share one docker network).
set -eu
address=$(ip -4 -o addr show dev eth0 | awk '{print $4; exit}')
node_ip=${address%/*}
last=${node_ip##*.}
prefix=${node_ip%.*}
mkdir -p /etc/cni/net.d
cat >/etc/cni/net.d/10-ktest-bridge.conflist <<CONFIG
{
  "cniVersion": "0.4.0",
  "name": "ktest-bridge",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "10.244.${last}.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CONFIG
i=1
while [ "$i" -le 254 ]; do
  if [ "$i" -ne "$last" ]; then
    ip route replace "10.244.$i.0/24" via "$prefix.$i" dev eth0
  fi
  i=$((i + 1))
done
