#!/bin/sh
cat /app/suffix.txt >> /app/hello.txt
