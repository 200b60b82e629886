#!/bin/sh
# Says how much of the agent's 100 MB reached the working folder.
echo "wrote $(cat /app/big 2>/dev/null | wc -c) bytes"
echo 1 > /logs/verifier/reward.txt
