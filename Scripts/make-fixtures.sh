#!/usr/bin/env bash
# Generates the small audio files the project ships: synthesized tones, encoded by the reference
# encoders. Re-run after changing it and commit the outputs; tests and demos use the committed files.
# MANIFEST.tsv records what each file was made from: its source's exact frame count, rate and
# channels, so tests can check that parsing and decoding give back exactly the source length.
set -euo pipefail
cd "$(dirname "$0")/../Fixtures"
for tool in sox ffmpeg lame soxi cc; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: run 'make deps'" >&2; exit 1; }
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
ff() { ffmpeg -nostdin -v error -y "$@"; }
tone() { # tone NAME RATE CHANNELS SECONDS: exact-length source from ffmpeg's lavfi
  local expr="0.4*sin(2*PI*440*t)+0.1*sin(2*PI*3000*t)"
  [ "$3" = 2 ] && expr="$expr|0.4*sin(2*PI*660*t)+0.1*sin(2*PI*5000*t)"
  ff -f lavfi -i "aevalsrc=$expr:s=$2:d=$4" -c:a pcm_s16le "$work/$1.wav"
}

# playpcm demo: 1 s, 440 Hz, -6 dBFS, 44.1 kHz mono 16-bit, as WAV and raw; 8-bit unsigned WAV.
sox -R -n -r 44100 -c 1 -b 16 -e signed-integer tone-440hz-mono-s16.wav synth 1 sine 440 vol 0.5
sox -R tone-440hz-mono-s16.wav -t raw tone-440hz-mono-s16le.raw
sox -R -n -r 22050 -c 1 -b 8 -e unsigned-integer tone-660hz-mono-u8.wav synth 0.5 sine 660 vol 0.5

tone s44 44100 2 1.1      # 48510 frames: not a multiple of 576, 1024 or 1152
tone s22 22050 1 1.1
tone s8 8000 1 1.3
tone s48 48000 2 0.9

echo -e "file\tsourceFrames\trate\tchannels\tgapless" > MANIFEST.tsv
add() { echo -e "$1\t$(soxi -s "$work/$2.wav")\t$(soxi -r "$work/$2.wav")\t$(soxi -c "$work/$2.wav")\t$3" >> MANIFEST.tsv; }

lame --quiet -b 128 "$work/s44.wav" lame-cbr128-44k-stereo.mp3;      add lame-cbr128-44k-stereo.mp3 s44 yes
lame --quiet -V 2 "$work/s44.wav" lame-vbr-v2-44k-stereo.mp3;         add lame-vbr-v2-44k-stereo.mp3 s44 yes
lame --quiet -b 64 -m m "$work/s22.wav" lame-cbr64-22k-mono-mpeg2.mp3; add lame-cbr64-22k-mono-mpeg2.mp3 s22 yes
lame --quiet -b 32 -m m "$work/s8.wav" lame-cbr32-8k-mono-mpeg25.mp3; add lame-cbr32-8k-mono-mpeg25.mp3 s8 yes
ff -i "$work/s44.wav" -c:a aac -b:a 96k -movflags +faststart ffmpeg-aac-44k-moov-first.m4a; add ffmpeg-aac-44k-moov-first.m4a s44 yes
ff -i "$work/s44.wav" -c:a aac -b:a 96k ffmpeg-aac-44k-moov-last.m4a;  add ffmpeg-aac-44k-moov-last.m4a s44 yes
ff -i "$work/s48.wav" -c:a aac -b:a 64k -f adts ffmpeg-aac-48k.aac;    add ffmpeg-aac-48k.aac s48 no
ff -i "$work/s8.wav" -c:a pcm_s16be -f caf pcm-s16be-8k-mono.caf;      add pcm-s16be-8k-mono.caf s8 no
ff -i "$work/s22.wav" -c:a pcm_s16le pcm-s16-22k-mono.wav;             add pcm-s16-22k-mono.wav s22 no
ff -i "$work/s8.wav" -c:a pcm_f32le pcm-f32-8k-mono.wav;               add pcm-f32-8k-mono.wav s8 no
sox -R "$work/s8.wav" -b 24 pcm-s24-8k-mono-extensible.wav;              add pcm-s24-8k-mono-extensible.wav s8 no
sox -R "$work/s8.wav" pcm-s16be-8k-mono.aiff;                             add pcm-s16be-8k-mono.aiff s8 no
ff -i "$work/s8.wav" -c:a pcm_s16le -f aiff pcm-sowt-8k-mono.aifc;     add pcm-sowt-8k-mono.aifc s8 no

# Apple's other formats (issue 14). G.711 and ALAC keep the source length exactly ("exact": the
# frame count, not a gapless table); IMA ADPCM pads to its block ("no"), except where the WAV fact
# chunk gives the true count (sox writes it: "yes").
ff -i "$work/s8.wav" -c:a pcm_mulaw ulaw-8k-mono.wav;                   add ulaw-8k-mono.wav s8 exact
ff -i "$work/s8.wav" -c:a pcm_alaw alaw-8k-mono.wav;                    add alaw-8k-mono.wav s8 exact
ff -i "$work/s8.wav" -c:a pcm_mulaw ulaw-8k-mono.caf;                   add ulaw-8k-mono.caf s8 exact
ff -i "$work/s8.wav" -c:a pcm_alaw alaw-8k-mono.caf;                    add alaw-8k-mono.caf s8 exact
ff -i "$work/s8.wav" -c:a pcm_mulaw -f aiff ulaw-8k-mono.aifc;          add ulaw-8k-mono.aifc s8 exact
ff -i "$work/s8.wav" -c:a pcm_alaw -f aiff alaw-8k-mono.aifc;           add alaw-8k-mono.aifc s8 exact
ff -i "$work/s22.wav" -c:a adpcm_ima_qt ima4-22k-mono.caf;              add ima4-22k-mono.caf s22 no
ff -i "$work/s22.wav" -c:a adpcm_ima_qt -f aiff ima4-22k-mono.aifc;     add ima4-22k-mono.aifc s22 no
ff -i "$work/s48.wav" -c:a adpcm_ima_wav ima-adpcm-48k-stereo-ffmpeg.wav; add ima-adpcm-48k-stereo-ffmpeg.wav s48 no
sox -R "$work/s22.wav" -e ima-adpcm ima-adpcm-22k-mono-sox-fact.wav;   add ima-adpcm-22k-mono-sox-fact.wav s22 yes
ff -i "$work/s44.wav" -c:a alac alac-44k-stereo.m4a;                    add alac-44k-stereo.m4a s44 exact
ff -i "$work/s44.wav" -c:a alac alac-44k-stereo-pakt-after-data.caf;    add alac-44k-stereo-pakt-after-data.caf s44 exact
ff -f lavfi -i "aevalsrc=0.3*sin(2*PI*300*t)|0.25*sin(2*PI*450*t)|0.2*sin(2*PI*600*t)|0.1*sin(2*PI*80*t)|0.15*sin(2*PI*750*t)|0.15*sin(2*PI*900*t):s=48000:d=0.25:c=5.1" \
  -c:a pcm_s24le "$work/six.wav"
ff -i "$work/six.wav" -c:a alac -sample_fmt s32p alac-s24-48k-5.1.m4a; add alac-s24-48k-5.1.m4a six exact
ff -f lavfi -i "anoisesrc=d=0.25:c=white:r=22050:a=0.9:s=7" -c:a pcm_s16le "$work/noise.wav"
ff -i "$work/noise.wav" -c:a alac alac-22k-mono-noise.caf;              add alac-22k-mono-noise.caf noise exact
sox -R -n -r 8000 -c 1 "$work/speech.wav" synth 1.3 sine 300-900 vol 0.4
sox -R "$work/speech.wav" -t amr-nb amr-nb-8k-mono.amr;                 add amr-nb-8k-mono.amr speech exact
ff -i amr-nb-8k-mono.amr -c copy amr-nb-8k-mono.caf;                    add amr-nb-8k-mono.caf speech exact
ff -i amr-nb-8k-mono.amr -c copy -f 3gp amr-nb-8k-mono.3gp;             add amr-nb-8k-mono.3gp speech exact
# AMR-WB: no Debian tool encodes it; a small helper on the VisualOn encoder does (libvo-amrwbenc-dev).
cc -O2 -o "$work/amrwb-encode" ../Scripts/amrwb-encode.c -lvo-amrwbenc
sox -R -n -r 16000 -c 1 -b 16 -e signed-integer "$work/speech16.wav" synth 1.3 sine 300-1900 vol 0.4
sox -R "$work/speech16.wav" -t raw - | "$work/amrwb-encode" 8 > amr-wb-16k-mono.awb; add amr-wb-16k-mono.awb speech16 exact
ff -i amr-wb-16k-mono.awb -c copy -f 3gp amr-wb-16k-mono.3gp;           add amr-wb-16k-mono.3gp speech16 exact

# Fragmented MP4 (moov with mvex, then moof/traf/trun + mdat), repackaged from the files above so
# the packets are known: all samples in fragments, with a sidx and moof-relative offsets, and
# the first fragment's samples in moov with the rest in fragments.
fragment() { ff -i "$1" -c copy -movflags "$2" -frag_duration 200000 "$3"; add "$3" "$4" "$5"; }
fragment ffmpeg-aac-44k-moov-first.m4a frag_keyframe+empty_moov aac-44k-fragmented.m4a s44 no
fragment ffmpeg-aac-44k-moov-first.m4a frag_keyframe+empty_moov+default_base_moof+global_sidx aac-44k-fragmented-sidx.m4a s44 no
fragment ffmpeg-aac-44k-moov-first.m4a frag_keyframe aac-44k-fragmented-after-moov-samples.m4a s44 no
fragment alac-44k-stereo.m4a frag_keyframe+empty_moov alac-44k-stereo-fragmented.m4a s44 exact

# MP3 as real files carry it (issue 14): free format (bit-rate index 0, frame size found by the
# parser), and the LAME file's packets in an MP4 (esds object type 0x6B) and a QuickTime '.mp3'
# sample entry. ffmpeg writes an edit list for those that keeps the padding ("no").
lame --quiet --freeformat -b 400 "$work/s44.wav" lame-freeformat-400k-44k-stereo.mp3; add lame-freeformat-400k-44k-stereo.mp3 s44 yes
ff -i lame-cbr128-44k-stereo.mp3 -c copy -f mp4 mp3-in-mp4-44k-stereo.mp4;   add mp3-in-mp4-44k-stereo.mp4 s44 no
ff -i lame-cbr128-44k-stereo.mp3 -c copy -f mov mp3-in-mov-44k-stereo.mov;   add mp3-in-mov-44k-stereo.mov s44 no

# The aqplay demo (make demo): 4 s of a little synthesized melody, AAC in M4A with the index first.
melody="0.25*sin(2*PI*t*(261.63*lt(mod(t,2),0.5)+329.63*gte(mod(t,2),0.5)*lt(mod(t,2),1)+392*gte(mod(t,2),1)*lt(mod(t,2),1.5)+523.25*gte(mod(t,2),1.5)))*(1-0.6*mod(t,0.5))"
ff -f lavfi -i "aevalsrc='$melody|$melody':s=44100:d=4" -c:a pcm_s16le "$work/demo.wav"
ff -i "$work/demo.wav" -c:a aac -b:a 128k -movflags +faststart demo-melody.m4a; add demo-melody.m4a demo yes

sha256sum $(ls | grep -v -e SHA256SUMS | sort) > SHA256SUMS
