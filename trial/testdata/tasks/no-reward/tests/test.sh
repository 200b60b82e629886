#!/bin/sh
# A verifier that writes no reward (a broken one): the trial is a
# verifier_error, whatever the agents left in /logs/verifier. It shows what
# it finds among the tests.
ls -la /tests /logs/verifier
exit 0
