#!/bin/sh
# The main service's host folder is readable and read-only; the sidecar
# serves what its own host folder holds.
read=$(cat /mnt/host/secret.txt)
served=$(wget -qO- http://seed:8080/page.txt)
if echo verifier > /mnt/host/by-verifier.txt; then wrote=yes; else wrote=no; fi
echo "read=$read served=$served wrote=$wrote"
if [ "$read" = "read-from-the-host" ] && [ "$served" = "served-from-the-host" ] && [ "$wrote" = no ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
