#!/bin/sh
# A stack's launcher: its agent reads the gateway token from MY_TOKEN (the
# stack maps the contract's token there), not from the contract's file.
printf '%s\n' "$MY_TOKEN" > "$HOME/token"
chmod 600 "$HOME/token"
export TROUPE_LLM_TOKEN_FILE="$HOME/token"
echo "stack plain: model $MY_MODEL, mode $PLAIN_MODE, channel ${TROUPE_CHANNEL:+set}" >&2
exec /opt/plain/bin/agent agent
