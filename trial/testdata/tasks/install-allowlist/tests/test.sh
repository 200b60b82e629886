#!/bin/sh
# Verifier: reward 1 when /app/hello.txt holds exactly "Hello, world!"
# (one trailing newline allowed), else 0.
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then
  echo "hello.txt is correct"
  echo 1 > /logs/verifier/reward.txt
else
  echo "hello.txt is missing or wrong:"
  cat /app/hello.txt 2>&1 || true
  echo 0 > /logs/verifier/reward.txt
fi
