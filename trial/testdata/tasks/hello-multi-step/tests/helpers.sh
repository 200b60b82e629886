# Shared by the steps' tests: uploaded to /tests before each step's own.
reward() {
  mkdir -p /logs/verifier
  if [ "$1" = "$2" ]; then echo 1 > /logs/verifier/reward.txt; else echo "got '$1', want '$2'"; echo 0 > /logs/verifier/reward.txt; fi
}
