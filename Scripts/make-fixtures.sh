#!/usr/bin/env bash
# Generates the small audio files the project ships (all synthesized here, no third-party material).
# Re-run after changing it and commit the outputs; tests and demos use the committed files.
set -euo pipefail
cd "$(dirname "$0")/../Fixtures"
command -v sox >/dev/null || { echo "sox is missing: run 'make deps'" >&2; exit 1; }

# 1 s, 440 Hz, -6 dBFS, 44.1 kHz mono 16-bit: the playpcm demo, as WAV and as raw PCM.
sox -n -r 44100 -c 1 -b 16 -e signed-integer tone-440hz-mono-s16.wav synth 1 sine 440 vol 0.5
sox tone-440hz-mono-s16.wav -t raw tone-440hz-mono-s16le.raw
# 0.5 s, 8-bit unsigned, 22.05 kHz mono: playpcm's 8-bit path.
sox -n -r 22050 -c 1 -b 8 -e unsigned-integer tone-660hz-mono-u8.wav synth 0.5 sine 660 vol 0.5

sha256sum tone-440hz-mono-s16.wav tone-440hz-mono-s16le.raw tone-660hz-mono-u8.wav > SHA256SUMS
