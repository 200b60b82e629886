#!/bin/sh
# Never finishes.
sleep 600
