#!/bin/sh
sleep 600 &
echo 41 > /app/answer.txt
echo "solved, wrongly"
