#!/bin/sh
# The task's own test.sh: each step's tests/test.sh overrides it.
echo "the task-level test.sh ran: a step's own should have replaced it"
echo 0 > /logs/verifier/reward.txt
