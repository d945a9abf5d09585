#!/bin/bash
# The oracle: the expected answer.
mkdir -p /app && printf '%s\n' "hello" > /app/answer.md
