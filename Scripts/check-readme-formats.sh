#!/usr/bin/env bash
# The README's table of formats against what aqinfo reads. Each row below is a file of one
# container and codec: a fixture of the project's, or one a reference tool (ffmpeg, sox, lame, flac,
# opusenc, oggenc) makes from a generated tone. For each, aqinfo must read it as that container and
# codec, and the README's table must have a row naming the extension and the codec; every extension
# the table names must be checked here; and the formats the README says are refused are refused
# by name. Run by `make docs`.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
$SWIFT build -q --product aqinfo
aqinfo="$($SWIFT build --show-bin-path)/aqinfo"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sox -n -r 44100 -c 2 -b 16 "$work/tone.wav" synth 0.5 sine 440 vol 0.5
sox -n -r 48000 -c 2 -b 16 "$work/tone48.wav" synth 0.5 sine 440 vol 0.5
# Apple's own encoders' files from the shared fixtures, where present (a fresh clone has none).
shared=${AQ_FIXTURES:-../shared/fixtures}
make_file() {  # $1: the recipe, $2: the output
  local src="$work/tone.wav" src48="$work/tone48.wav" out="$2"
  case "$1" in
    Fixtures/*) cp "$1" "$out" ;;
    shared:*) cp "$shared/${1#shared:}" "$out" ;;
    *) eval "$1" >/dev/null 2>&1 </dev/null ;;
  esac
}
# extension | the README's word for the codec | recipe | aqinfo's fileType | aqinfo's format
samples=$(cat <<'ROWS'
mp3|MP3|lame --quiet "$src" "$out"|MPG3|mp3
mp2|MP2|ffmpeg -v error -y -i "$src" -c:a mp2 -f mp2 "$out"|MPG3|mp2
aac|AAC|Fixtures/ffmpeg-aac-48k.aac|adts|aac-lc
m4a|AAC|Fixtures/ffmpeg-aac-44k-moov-first.m4a|m4af|aac-lc
m4a|ALAC|Fixtures/alac-44k-stereo.m4a|m4af|alac
mp4|MP3|Fixtures/mp3-in-mp4-44k-stereo.mp4|m4af|mp3
mp4|Opus|ffmpeg -v error -y -i "$src48" -c:a libopus -f mp4 "$out"|m4af|opus
mp4|FLAC|ffmpeg -v error -y -i "$src" -c:a flac -strict -2 -f mp4 "$out"|m4af|flac
mov|MP3|Fixtures/mp3-in-mov-44k-stereo.mov|m4af|mp3
3gp|AMR|Fixtures/amr-nb-8k-mono.3gp|m4af|samr
caf|PCM|Fixtures/pcm-s16be-8k-mono.caf|caff|lpcm
caf|ALAC|Fixtures/alac-22k-mono-noise.caf|caff|alac
caf|IMA4|Fixtures/ima4-22k-mono.caf|caff|ima4
caf|µ-law|Fixtures/ulaw-8k-mono.caf|caff|ulaw
caf|A-law|Fixtures/alaw-8k-mono.caf|caff|alaw
caf|AMR|Fixtures/amr-nb-8k-mono.caf|caff|samr
caf|AAC|shared:aac-lc-afconvert-pakt.caf|caff|aac-lc
wav|PCM|Fixtures/pcm-s16-22k-mono.wav|WAVE|lpcm
wav|µ-law|Fixtures/ulaw-8k-mono.wav|WAVE|ulaw
wav|A-law|Fixtures/alaw-8k-mono.wav|WAVE|alaw
wav|IMA ADPCM|Fixtures/ima-adpcm-48k-stereo-ffmpeg.wav|WAVE|ms??
aiff|PCM|Fixtures/pcm-s16be-8k-mono.aiff|AIFF|lpcm
aif|PCM|sox "$src" -t aiff "$out"|AIFF|lpcm
aifc|IMA4|Fixtures/ima4-22k-mono.aifc|AIFC|ima4
aifc|µ-law|Fixtures/ulaw-8k-mono.aifc|AIFC|ulaw
aifc|A-law|Fixtures/alaw-8k-mono.aifc|AIFC|alaw
amr|AMR|Fixtures/amr-nb-8k-mono.amr|amrf|samr
awb|AMR-WB|Fixtures/amr-wb-16k-mono.awb|amrf|sawb
flac|FLAC|flac -s -f "$src" -o "$out"|flac|flac
ogg|Vorbis|oggenc -Q "$src" -o "$out"|OggS|vorbis
ogg|FLAC|flac -s -f --ogg "$src" -o "$out"|OggS|flac
opus|Opus|opusenc --quiet "$src" "$out"|OggS|opus
oga|Vorbis|oggenc -Q "$src" -o "$out"|OggS|vorbis
webm|Opus|ffmpeg -v error -y -i "$src48" -c:a libopus -f webm "$out"|mkva|opus
webm|Vorbis|ffmpeg -v error -y -i "$src" -c:a libvorbis -f webm "$out"|mkva|vorbis
mka|FLAC|ffmpeg -v error -y -i "$src" -c:a flac -f matroska "$out"|mkva|flac
mka|AAC|ffmpeg -v error -y -i "$src" -c:a aac -f matroska "$out"|mkva|aac-lc
mka|MP3|ffmpeg -v error -y -i "$src" -c:a libmp3lame -f matroska "$out"|mkva|mp3
mka|PCM|ffmpeg -v error -y -i "$src" -c:a pcm_s16le -f matroska "$out"|mkva|lpcm
mkv|Opus|ffmpeg -v error -y -i "$src48" -c:a libopus -f matroska "$out"|mkva|opus
ts|AAC|ffmpeg -v error -y -i "$src" -c:a aac -f mpegts "$out"|MP2T|aac-lc
ts|MP3|ffmpeg -v error -y -i "$src" -c:a libmp3lame -f mpegts "$out"|MP2T|mp3
ROWS
)
# The README's table: | container | extensions | codecs |, between "## Formats" and the next heading.
table=$(awk '/^## Formats/ { on = 1; next } /^## / { on = 0 } on && /^\|/' README.md)
[ -n "$table" ] || { echo "README.md has no table under '## Formats'"; exit 1; }
failed=0
n=0
while IFS='|' read -r ext codec recipe wantType wantFormat; do
  n=$((n + 1))
  file="$work/sample$n.$ext"
  if [[ $recipe == shared:* ]] && [ ! -f "$shared/${recipe#shared:}" ]; then
    echo "skipped .$ext $codec: ${recipe#shared:} is not in $shared"; continue
  fi
  make_file "$recipe" "$file" || { echo "FAILED .$ext $codec: could not make the sample ($recipe)"; failed=1; continue; }
  if ! json=$("$aqinfo" --json "$file" 2>&1 </dev/null); then
    echo "FAILED .$ext $codec: aqinfo refused it: $json"; failed=1; continue
  fi
  gotType=$(sed -n 's/^  "fileType" : "\(.*\)",*$/\1/p' <<<"$json")
  gotFormat=$(sed -n 's/^  "format" : "\(.*\)",*$/\1/p' <<<"$json")
  if [ "$gotType" != "$wantType" ] || [ "$gotFormat" != "$wantFormat" ]; then
    echo "FAILED .$ext $codec: aqinfo read $gotType/$gotFormat, not $wantType/$wantFormat"; failed=1; continue
  fi
  if ! grep -F "\`.$ext\`" <<<"$table" | awk -F'|' '{ print $4 }' | grep -qF "$codec"; then
    echo "FAILED .$ext $codec: aqinfo reads it, but the README's table has no row with \`.$ext\` and $codec"; failed=1; continue
  fi
  echo "ok .$ext $codec ($gotType/$gotFormat)"
done <<<"$samples"
# Every extension the table names is checked above.
for ext in $(awk -F'|' '{ print $3 }' <<<"$table" | grep -o '`\.[a-z0-9]*`' | tr -d '`.' | sort -u); do
  grep -q "^$ext|" <<<"$samples" || { echo "FAILED the README names .$ext, which no sample here checks"; failed=1; }
done
# Every codec each row names has a sample of one of the row's extensions.
while IFS='|' read -r _ container extensions codecs _; do
  case "$container" in *container*|*---*) continue ;; esac
  exts=$(grep -o '`\.[a-z0-9]*`' <<<"$extensions" | tr -d '`.')
  while read -r codec; do
    [ -n "$codec" ] || continue
    found=0
    for ext in $exts; do grep -qF "$ext|$codec|" <<<"$samples" && found=1; done
    [ $found = 1 ] || { echo "FAILED the README's row '$(xargs <<<"$container")' names $codec, which no sample of $(xargs <<<"$exts") checks"; failed=1; }
  done < <(sed 's/([^)]*)//g' <<<"$codecs" | tr ',' '\n' | sed 's/^ *//; s/ *$//')
done <<<"$table"
# What the README says is refused: AC-3 and E-AC-3, refused by name.
for codec in ac3:AC-3 eac3:E-AC-3; do
  ffmpeg -v error -y -nostdin -i "$work/tone48.wav" -c:a "${codec%%:*}" -f "${codec%%:*}" "$work/refused.${codec%%:*}"
  if out=$("$aqinfo" "$work/refused.${codec%%:*}" 2>&1 </dev/null); then
    echo "FAILED ${codec#*:}: aqinfo read it, but the README says it is refused"; failed=1
  elif ! grep -qF "${codec#*:}" <<<"$out"; then
    echo "FAILED ${codec#*:}: aqinfo refused it without naming it: $out"; failed=1
  else
    echo "ok ${codec#*:} refused: $out"
  fi
  grep -qF "${codec#*:}" README.md || { echo "FAILED the README does not say ${codec#*:} is refused"; failed=1; }
done
[ $failed = 0 ] && echo "the README's formats are what aqinfo reads ($n samples)"
exit $failed
