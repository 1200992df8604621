//! Reading a `.npy` file takes no memory beyond its blob: the host limit
//! refuses a large one from its header, before a byte of its data is
//! read (a 200 MB input once peaked at 385 MB before the limit spoke).
//! One test alone in its binary: the limit is the process's.

#[test]
#[cfg(target_os = "linux")]
fn the_limit_refuses_a_large_file_before_reading_it() {
    use std::io::Write;
    // The process's peak resident memory so far, in bytes (VmHWM).
    let peak = || -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    };
    // 64 M values (256 MB), written sparse: the file costs no disk.
    let path = std::env::temp_dir().join(format!("npy-memory-{}.npy", std::process::id()));
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 1048576), }";
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(b"\x93NUMPY\x01\x00").unwrap();
    file.write_all(&(header.len() as u16).to_le_bytes())
        .unwrap();
    file.write_all(header.as_bytes()).unwrap();
    let start = 10 + header.len() as u64;
    file.set_len(start + (256 << 20)).unwrap();
    drop(file);

    blob_runtime::set_host_memory_limit(16 << 20);
    let before = peak();
    let err = blob_runtime::npy::read::<f32>(&path)
        .unwrap_err()
        .to_string();
    let grew = peak().saturating_sub(before);
    std::fs::remove_file(&path).unwrap();
    assert!(
        err.contains("npy-memory") && err.contains("above the limit"),
        "{err}"
    );
    assert!(
        grew < 8 << 20,
        "refusing a 256 MB file raised the peak by {} MB",
        grew >> 20
    );
}
