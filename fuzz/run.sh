#!/usr/bin/env bash
# Fuzzes the Caffe decoders, `convert`'s path and the borrowed blob
# reader, seeded with every real Caffe file of the repository's
# tests/fixtures; then the .safetensors reader, seeded with small
# converted files; then the prototxt readers and caffe.proto's schema
# reader, seeded with the repository's .prototxt files; then nets built
# and run from prototxts; then the .npy reader, seeded with the
# reference outputs; then the solver prototxt reader; then a store's
# Datum records (raw, JPEG, PNG) through decoding and transform_param;
# then AnnotatedData's (and LaneData's) records through the layer; then
# convert_annoset's VOC XML and TuSimple JSON files; then WindowData's
# window files and DenseImageData's pair lists; then the SSD test set's
# name-size files and label maps. Each corpus also
# holds fuzz/seeds' files that once found a fault. Usage: fuzz/run.sh [seconds per target] (600).
set -euo pipefail
cd "$(dirname "$0")"
corpus=corpus/decode
mkdir -p "$corpus"
find ../tests/fixtures -type f \( -name '*.caffemodel' -o -name '*.binaryproto' -o -name '*.solverstate' \) \
    -size -2M -exec cp {} "$corpus/" \;
# Files that once took memory out of proportion to their size.
cp seeds/*.caffemodel "$corpus/"
cargo +nightly fuzz run decode "$corpus" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1
cargo +nightly fuzz run convert "$corpus" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1
cargo +nightly fuzz run blob_view "$corpus" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

tensors=corpus/safetensors
mkdir -p "$tensors"
cargo run -q --manifest-path ../Cargo.toml -p blobflow-cli -- \
    convert ../tests/fixtures/mtcnn_det1/det1.caffemodel "$tensors/det1.safetensors"
cp seeds/*.safetensors "$tensors/"
cargo +nightly fuzz run safetensors "$tensors" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

texts=corpus/prototxt
mkdir -p "$texts"
find .. \( -path ../target -o -path ../fuzz/corpus -o -path ../fuzz/target \) -prune -o -name '*.prototxt' -size -64k -print \
    | while read -r f; do cp "$f" "$texts/$(echo "$f" | tr '/.' '__')"; done
cp seeds/long_names.prototxt "$texts/"
cargo +nightly fuzz run prototxt "$texts" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1
cargo +nightly fuzz run params "$texts" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

# Solver prototxts: Caffe's own and an out-of-range count.
solvers=corpus/solver
mkdir -p "$solvers"
find .. \( -path ../target -o -path ../fuzz/corpus -o -path ../fuzz/target \) -prune -o -name '*solver*.prototxt' -print \
    | while read -r f; do cp "$f" "$solvers/$(echo "$f" | tr '/.' '__')"; done
cp seeds/solver_int32.prototxt "$solvers/"
cargo +nightly fuzz run solver "$solvers" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

# Nets built and run: seeded with the small nets only (a big one spends
# each run filling its weights), a small SSD head and 3x3 layers that
# take Winograd, and branches whose blobs share memory when reused.
nets=corpus/net
mkdir -p "$nets"
find "$texts" -type f -size -12k -exec cp {} "$nets/" \;
cp seeds/ssd_head.prototxt seeds/winograd.prototxt seeds/conv_no_channel.prototxt seeds/fork_layers.prototxt seeds/recurrent.prototxt seeds/recurrent_exposed.prototxt seeds/multibox_loss.prototxt seeds/multibox_hard_example.prototxt seeds/long_field_name.prototxt seeds/yolo_layers.prototxt seeds/yolov3_loss.prototxt seeds/winograd_empty_batch.prototxt seeds/reuse_memory.prototxt "$nets/"
cargo +nightly fuzz run net "$nets" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

arrays=corpus/npy
mkdir -p "$arrays"
cp ../tests/fixtures/nets/mtcnn/*.npy seeds/*.npy "$arrays/"
cargo +nightly fuzz run npy "$arrays" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

records=corpus/datum
mkdir -p "$records"
cp seeds/datum_*.bin "$records/"
cargo +nightly fuzz run datum "$records" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

# AnnotatedData's records (its first byte: the settings), each the
# store's one, through the layer.
annotated=corpus/annotated
mkdir -p "$annotated"
cp seeds/annotated_*.bin "$annotated/"
cargo +nightly fuzz run annotated "$annotated" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

# convert_annoset's VOC XML annotations, seeded with the MobileNet-SSD
# dataset's.
voc=corpus/voc
mkdir -p "$voc"
cp ../tests/fixtures/nets/mobilenet_ssd/dataset/Labels/*.xml "$voc/"
cp seeds/tusimple_lanes.json "$voc/"
cargo +nightly fuzz run voc "$voc" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

# WindowData's window files (its first byte: context, square mode,
# mirror, the foreground share), cut from a PNG the target writes.
windows=corpus/window_file
mkdir -p "$windows"
cp seeds/window_file.bin "$windows/"
cp ../data/tests/fixtures/caffe-window-data/windows_*.txt "$windows/"
cargo +nightly fuzz run window_file "$windows" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

# DenseImageData's lists of image and label pairs (its first byte:
# mirror, resize, crop, batch size, shuffle), from PNGs the target writes.
pairs=corpus/dense_pairs
mkdir -p "$pairs"
cp seeds/dense_pairs.bin "$pairs/"
cargo +nightly fuzz run dense_pairs "$pairs" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1

# The SSD fork's test-set files (its first byte: a name_size_file or a
# label map) as DetectionOutput's save_output_param and DetectionEvaluate
# read them.
detection=corpus/detection_files
mkdir -p "$detection"
printf '\000img1 100 200\nimg2 50 50\n' > "$detection/sizes"
{ printf '\001'; cat ../tests/fixtures/nets/mobilenet_ssd/dataset/labelmap.prototxt; } > "$detection/labels"
cargo +nightly fuzz run detection_files "$detection" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1
