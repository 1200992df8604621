//! Prints the folder of the CPU CUDA driver, for `LD_LIBRARY_PATH`:
//! `LD_LIBRARY_PATH=$(cargo run -q -p cuda-on-cpu --bin cpu-driver-dir) cargo test --features cuda --test gpu`.

fn main() {
    println!("{}", cuda_on_cpu::CPU_DRIVER_DIR);
}
