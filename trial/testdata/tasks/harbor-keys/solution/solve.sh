#!/bin/sh
# The oracle: what the agent of this task does, as the task's agent user.
{ whoami; id -u; pwd; echo "$GREETING $HOSTVAL"; } > /app/agent.txt
echo "solver: $SOLVER"
