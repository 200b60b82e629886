#!/bin/sh
# Runs in the working folder after workdir/ is copied in, before the agents.
echo "setup ran in $(pwd)" > /app/setup-ran.txt
rm -- "$0"
