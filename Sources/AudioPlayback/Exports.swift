// The file writers (`AudioFileWriter`, `PCMFileWriter`, `WAVFileWriter`) live with the container
// writers in AudioFileStream; code that imports only AudioPlayback keeps finding them, and the
// file and metadata types its API speaks of.
@_exported import AudioFileStream
