#!/bin/sh
printf Hello > /app/hello.txt
