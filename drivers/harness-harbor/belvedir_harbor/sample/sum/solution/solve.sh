#!/bin/bash
# The oracle: the expected answer.
mkdir -p /app && printf '%s\n' "5" > /app/answer.md
