#!/usr/bin/env bash
# Builds every libFuzzer target (Fuzz/, with AddressSanitizer) and runs each for FUZZ_SECONDS.
# Fails on any crash, leak or timeout; the input that did it is kept in Fuzz/crashes/.
# Seeds are the project's own generated fixtures; the corpus grows in .fuzz/corpus/TARGET.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"mp3 adts mp4 caf riff amr decode-mp3 decode-aac decode-apple icy ts hls-playlist ogg flac decode-xiph matroska"}
mkdir -p .fuzz Fuzz/crashes
summary=.fuzz/summary.tsv
printf 'target\truns\tseconds\truns/s\tcoverage (edges)\tfeatures\tcorpus\tresult\n' > "$summary"

seed() {   # seed TARGET FILES...: each file three times, behind different chunking bytes
  local dir=.fuzz/seeds/$1; shift
  rm -rf "$dir"; mkdir -p "$dir"
  for f in "$@"; do
    for b in 0 2 5; do
      { printf "\\$(printf '%03o' "$b")"; cat "$f"; } > "$dir/$(basename "$f").c$b"
    done
  done
}

failed=0
for t in $targets; do
  # swiftc's -sanitize=fuzzer alone does not instrument for coverage here: ask for libFuzzer's kind.
  AQ_FUZZ=1 swift build -c release --scratch-path .build-fuzz --sanitize=fuzzer --sanitize=address \
    -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp --product "fuzz-$t" 2>&1 \
    | grep -E "error:|Compiling fuzz|Build of product" || true
  case $t in
    mp3|decode-mp3) seed "$t" Fixtures/*.mp3 ;;
    adts) seed "$t" Fixtures/*.aac ;;
    mp4|decode-aac) seed "$t" Fixtures/*.m4a ;;
    caf) seed "$t" Fixtures/*.caf ;;
    riff) seed "$t" Fixtures/*.wav Fixtures/*.aiff Fixtures/*.aifc ;;
    amr) seed "$t" Fixtures/*.amr Fixtures/*.awb ;;
    decode-apple) seed "$t" Fixtures/alac-* Fixtures/ima* Fixtures/ulaw-* Fixtures/alaw-* Fixtures/amr-* ;;
    icy) seed "$t" Fixtures/lame-cbr128-44k-stereo.mp3 ;;
    ts) ffmpeg -v error -y -i Fixtures/demo-melody.m4a -c:a copy -f mpegts .fuzz/demo-melody.ts
        head -c 8192 .fuzz/demo-melody.ts > .fuzz/demo-melody-head.ts
        seed "$t" .fuzz/demo-melody-head.ts ;;
    hls-playlist) seed "$t" Fuzz/Seeds/hls/*.m3u8 ;;
    matroska)
        # Two seconds of the demo melody as WebM Opus (ffmpeg's, and a live one of unknown sizes)
        # and as Matroska FLAC, AAC and PCM.
        ffmpeg -v error -y -t 2 -i Fixtures/demo-melody.m4a -c:a libopus .fuzz/demo-melody.webm
        ffmpeg -v error -y -t 2 -i Fixtures/demo-melody.m4a -c:a libopus -live 1 -f webm .fuzz/demo-melody-live.webm
        for spec in "flac:-c:a flac" "aac:-c:a copy" "pcm:-c:a pcm_s16le"; do
          ffmpeg -v error -y -t 2 -i Fixtures/demo-melody.m4a ${spec#*:} ".fuzz/demo-melody-${spec%%:*}.mka"
        done
        seed "$t" .fuzz/demo-melody.webm .fuzz/demo-melody-live.webm .fuzz/demo-melody-*.mka ;;
    ogg|flac|decode-xiph)
        # Two seconds of the demo melody in each Xiph format, a chain of two Opus links among them.
        for spec in "opus:-c:a libopus" "ogg:-c:a libvorbis" "oga:-c:a flac -f ogg" "flac:-c:a flac"; do
          ext=${spec%%:*}
          ffmpeg -v error -y -t 2 -i Fixtures/demo-melody.m4a ${spec#*:} ".fuzz/demo-melody.$ext"
        done
        cat .fuzz/demo-melody.opus .fuzz/demo-melody.opus > .fuzz/demo-chain.opus
        case $t in
          ogg) seed "$t" .fuzz/demo-melody.opus .fuzz/demo-melody.ogg .fuzz/demo-melody.oga .fuzz/demo-chain.opus ;;
          flac) seed "$t" .fuzz/demo-melody.flac ;;
          *) seed "$t" .fuzz/demo-melody.opus .fuzz/demo-melody.ogg .fuzz/demo-melody.oga .fuzz/demo-melody.flac ;;
        esac ;;
  esac
  mkdir -p ".fuzz/corpus/$t"
  log=.fuzz/$t.log
  # Parser targets stay fast with inputs of at most 8 KiB (seeds are cut there: their headers and
  # first packets are what the parsers branch on); decoding targets take whole small files.
  case $t in decode-*) max_len=262144 ;; *) max_len=8192 ;; esac
  set +e
  ".build-fuzz/release/fuzz-$t" ".fuzz/corpus/$t" ".fuzz/seeds/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len="$max_len" -print_final_stats=1 -artifact_prefix="Fuzz/crashes/$t-" > "$log" 2>&1
  status=$?
  set -e
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  line=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$line")
  corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9A-Za-z]+).*/\1/p' <<<"$line")
  result=ok; [ $status = 0 ] || { result="FAILED (exit $status, see $log)"; failed=1; }
  rate=$(( ${runs:-0} / seconds ))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "fuzz-$t" "${runs:-?}" "$seconds" "$rate" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result" | tee -a "$summary"
done
column -t -s $'\t' "$summary"
exit $failed
