#!/bin/bash
# Write PROBE_WRITE_BYTES of zeros in three parts, into the workdir, /tmp and the home
# folder, as a harness gone wrong would; exits 1 if any write failed.
set -u
part=$((PROBE_WRITE_BYTES / 3))
failed=0
for target in ./big.bin /tmp/big.bin "$HOME/big.bin"; do
    echo "writing $part bytes to $target"
    head -c "$part" /dev/zero > "$target" || failed=1
done
ls -l ./big.bin /tmp/big.bin "$HOME/big.bin"
exit "$failed"
