/* Encodes 16 kHz mono signed 16-bit little-endian PCM (stdin) to an AMR-WB storage file (stdout,
 * "#!AMR-WB\n" then one ToC byte and payload per 20 ms frame) with the VisualOn encoder
 * (Debian: libvo-amrwbenc-dev). Used by make-fixtures.sh only: no Debian tool encodes AMR-WB.
 * Usage: amrwb-encode MODE < in.s16 > out.awb   (MODE 0..8: 6.60 ... 23.85 kbit/s)
 * A last partial frame is padded with silence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vo-amrwbenc/enc_if.h>

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 8;
    void *encoder = E_IF_init();
    short speech[320];
    unsigned char frame[64];
    fwrite("#!AMR-WB\n", 1, 9, stdout);
    size_t got;
    while ((got = fread(speech, sizeof(short), 320, stdin)) > 0) {
        if (got < 320) memset(speech + got, 0, (320 - got) * sizeof(short));
        int bytes = E_IF_encode(encoder, mode, speech, frame, 0);
        if (bytes <= 0) { fprintf(stderr, "amrwb-encode: the encoder failed\n"); return 1; }
        fwrite(frame, 1, (size_t)bytes, stdout);
    }
    E_IF_exit(encoder);
    return 0;
}
