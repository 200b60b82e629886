#!/bin/sh
# The oracle: what a perfect agent does.
printf 'Hello, world!\n' > /app/hello.txt
