#!/bin/sh
. /tests/helpers.sh
reward "$(cat /app/hello.txt 2>/dev/null)" "$GREETING"
