#!/bin/sh
. /tests/helpers.sh
if [ ! -f /app/setup-ran.txt ] || [ -e /app/setup.sh ]; then
  echo "setup.sh did not run, or did not remove itself"
  echo 0 > /logs/verifier/reward.txt
  exit 0
fi
reward "$(cat /app/hello.txt 2>/dev/null)" "$EXPECTED"
