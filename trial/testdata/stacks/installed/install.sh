#!/bin/sh
# A stack's install script (trial/install_test.go): it installs the agent
# from what the stack uploads, or, when the trial's network lets it, from
# allowed.test through troupe's egress proxy, into /usr/local/bin. It says
# what it had: its user, its network, and whether anything of a trial is
# in sight.
set -e
echo "installing as uid $(id -u) in $(pwd)"
echo "interfaces=$(ls /sys/class/net | tr '\n' ' ' | sed 's/ $//')"
echo "trial files: $(ls /run/troupe 2>&1 | head -1)"
echo "contract variables: $(env | grep -c '^TROUPE_' || true)"
mkdir -p /usr/local/bin
if [ -n "$HTTP_PROXY" ]; then
  wget -q -O /usr/local/bin/installed-agent http://allowed.test/installed-agent
  echo "fetched the agent from allowed.test"
else
  if wget -q -T 5 -O /dev/null http://example.com/ 2>/dev/null; then echo "network: reached example.com"; else echo "network: cannot reach example.com"; fi
  cp /opt/installed/src/installed-agent /usr/local/bin/installed-agent
fi
chmod 755 /usr/local/bin/installed-agent
echo "installed /usr/local/bin/installed-agent"
