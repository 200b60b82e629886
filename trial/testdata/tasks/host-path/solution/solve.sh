#!/bin/sh
cat /mnt/host/secret.txt
if echo agent > /mnt/host/by-agent.txt; then echo "the agent wrote to the host folder"; else echo "the agent could not write to the host folder"; fi
