#!/bin/bash
# The oracle: the expected answer.
mkdir -p /app && printf '%s\n' "Rome" > /app/answer.md
