#!/bin/bash
# Reward 1 when /app/answer.md holds "hello" (case, spaces and full stops aside), else 0.
mkdir -p /logs/verifier
answer="$(cat /app/answer.md 2>/dev/null | tr -d '[:space:].' | tr '[:upper:]' '[:lower:]')"
if [ "$answer" = "hello" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
