# Two commands do everything on a fresh Debian machine with Swift installed:
#   make demo   - installs what is missing, then plays the generated demo melody with aqplay
#   make test   - installs what is missing, then runs the test suite
#   make docs   - the DocC site of every product in .build/docs, checked in a headless browser
SWIFT ?= swift
# Libraries the modules link, the PulseAudio server the tests start, and the reference tools
# (encoders and decoders) the tests compare against, the Icecast and nginx servers the streaming tests start, and
# the private PipeWire (with WirePlumber, under its own D-Bus session) the PipeWire tests start, and
# the stand-in for rtkit on a private bus (Python's D-Bus binding) the real-time test asks.
APT_PACKAGES := libmpg123-dev libfaad-dev libpulse-dev libsoxr-dev librubberband-dev libopencore-amrnb-dev libopencore-amrwb-dev libasound2-dev \
                libopus-dev libvorbis-dev libflac-dev libavcodec-dev \
                pulseaudio pulseaudio-utils libasound2-plugins \
                lame ffmpeg sox mpg123 faad flac opus-tools vorbis-tools time icecast2 nginx-light loudgain mkvtoolnix \
                pipewire pipewire-bin wireplumber libspa-0.2-modules libpipewire-0.3-dev dbus python3-dbus python3-gi
# What the benchmarks compare against besides: Rubber Band's own command, and a speech synthesiser.
BENCH_PACKAGES := rubberband-cli espeak-ng valgrind loudgain
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# What the documentation check needs: a headless Chromium to render the DocC site.
DOCS_PACKAGES := chromium-headless-shell

.PHONY: deps demo test test-tsan docs bench fuzz fixtures clean

deps:
	@missing=""; for p in $(APT_PACKAGES) $(EXTRA_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

demo: deps
	$(SWIFT) run aqplay

# Serially: the real-time tests (a PulseAudio server, Icecast, paced sinks) must not compete for
# the cores with the decoding-heavy ones, or a loaded 2-core machine underruns them.
test: deps
	SWIFT=$(SWIFT) Scripts/test.sh --no-parallel

test-tsan: deps
	SWIFT=$(SWIFT) TSAN_OPTIONS="suppressions=$(CURDIR)/Scripts/tsan-suppressions.txt $(TSAN_OPTIONS)" \
		Scripts/test.sh --no-parallel --sanitize=thread --scratch-path .build-tsan

# The DocC site of every product in .build/docs, failing on a DocC warning or an undocumented
# public type, and checked in a headless Chromium; then the README's formats against aqinfo.
docs:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(DOCS_PACKAGES)"
	SWIFT=$(SWIFT) Scripts/docs.sh
	SWIFT=$(SWIFT) Scripts/check-readme-formats.sh

bench:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(BENCH_PACKAGES)"
	$(SWIFT) build -c release --product aqrender
	$(SWIFT) build -c release --product aqplay
	$(SWIFT) build -c release --product aqrecord
	$(SWIFT) build -c release --product aqmix
	$(SWIFT) build -c release --product aqinfo
	$(SWIFT) build -c release --product atoffline
	$(SWIFT) build -c release --product avengine
	$(SWIFT) run -c release aqbench

# libFuzzer targets with AddressSanitizer, FUZZ_SECONDS each (default 60); fails on a crash, leak or timeout.
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) Scripts/fuzz.sh

# The fixture script also builds a small AMR-WB encoding helper on the VisualOn encoder.
FIXTURE_PACKAGES := libvo-amrwbenc-dev gcc
fixtures:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(FIXTURE_PACKAGES)"
	Scripts/make-fixtures.sh

clean:
	rm -rf .build .build-tsan
