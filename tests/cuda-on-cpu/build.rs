//! Compiles every `.cu` file of `kernels/`, `layers/` and `examples/` as
//! C++ (with `cuda_on_cpu.h` standing in for CUDA's built-ins) into one
//! static library, and writes a Rust launcher for each `extern "C"
//! __global__` kernel, its parameter list read from the preprocessed
//! source itself so the tests cannot call a kernel with a list of their
//! own.
//!
//! The same objects, with `driver/*.cpp` and a table of the
//! kernels (`dispatch.cpp`, written here from the same parameter lists),
//! make the CPU CUDA driver: `cpu-driver/libcuda.so`, with `libcublas.so`,
//! `libcurand.so` and `libcudnn.so` naming the same file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let root = here.join("../..");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());

    let mut sources = Vec::new();
    for dir in ["kernels/src", "layers/src", "examples"] {
        // The whole tree: a new .cu file (a new op's folder) is built too.
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
        find_cu(&root.join(dir), &mut sources);
    }
    sources.sort();
    assert!(!sources.is_empty(), "no .cu files under {}", root.display());

    let shim = here.join("cuda_on_cpu.h");
    let runtime = here.join("cuda_on_cpu.cpp");
    println!("cargo:rerun-if-changed={}", shim.display());
    println!("cargo:rerun-if-changed={}", runtime.display());
    println!("cargo:rerun-if-env-changed=CXX");
    println!("cargo:rerun-if-env-changed=CI");

    let mut objects = vec![compile(&cxx, &shim, &runtime, &out.join("cuda_on_cpu.o"))];
    let mut kernels = Vec::new();
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let file = src
            .file_name()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        let stem = src
            .file_stem()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        objects.push(compile(&cxx, &shim, src, &out.join(format!("{stem}.o"))));
        for (name, params) in kernels_of(&preprocess(&cxx, src)) {
            kernels.push(Kernel {
                file: file.clone(),
                name,
                params,
            });
        }
    }

    let lib = out.join("libcuda_on_cpu.a");
    let _ = std::fs::remove_file(&lib);
    run(
        Command::new(std::env::var("AR").unwrap_or_else(|_| "ar".into()))
            .arg("crs")
            .arg(&lib)
            .args(&objects),
    );
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=cuda_on_cpu");

    std::fs::write(out.join("kernels.rs"), bindings(&kernels)).expect("write kernels.rs");

    cpu_driver(&cxx, &here, &out, &objects, &kernels);
}

/// Links the CPU CUDA driver into `OUT_DIR/cpu-driver` and tells the crate
/// where (`CPU_DRIVER_DIR`).
fn cpu_driver(cxx: &str, here: &Path, out: &Path, kernel_objects: &[PathBuf], kernels: &[Kernel]) {
    let driver_src = here.join("driver");
    println!("cargo:rerun-if-changed={}", driver_src.display());
    let dispatch = out.join("dispatch.cpp");
    std::fs::write(&dispatch, dispatch_table(kernels)).expect("write dispatch.cpp");
    let mut parts = vec![(dispatch, out.join("dispatch.o"))];
    for part in ["driver", "cublas", "curand", "cudnn"] {
        parts.push((
            driver_src.join(format!("{part}.cpp")),
            out.join(format!("cpu_{part}.o")),
        ));
    }
    let mut objects = kernel_objects.to_vec();
    for (src, obj) in parts {
        let mut cmd = Command::new(cxx);
        cmd.args(["-std=c++17", "-O3", "-fPIC", "-Wall", "-Wextra"]);
        if std::env::var_os("CI").is_some() {
            cmd.arg("-Werror");
        }
        run(cmd
            .arg("-I")
            .arg(&driver_src)
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj));
        objects.push(obj);
    }
    let dir = out.join("cpu-driver");
    std::fs::create_dir_all(&dir).expect("create cpu-driver");
    let lib = dir.join("libcpucuda.so");
    run(Command::new(cxx)
        .args(["-shared", "-o"])
        .arg(&lib)
        .args(&objects)
        .arg("-lpthread"));
    // One file under the names cudarc opens: the loader maps it once, so
    // the driver, cuBLAS, cuRAND and cuDNN share one memory map.
    for name in ["libcuda.so", "libcublas.so", "libcurand.so", "libcudnn.so"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("libcpucuda.so", &link).expect("link the driver's names");
    }
    println!("cargo:rustc-env=CPU_DRIVER_DIR={}", dir.display());
}

/// The C++ table of kernels the CPU driver runs: a thunk for each that
/// unpacks cuLaunchKernel's argument array into the kernel's parameters.
fn dispatch_table(kernels: &[Kernel]) -> String {
    let mut decls = String::new();
    let mut rows = String::new();
    for k in kernels {
        let c_type = |p: &Param| {
            let scalar = match p.scalar {
                "i64" => "long long",
                "i32" => "int",
                "u32" => "unsigned int",
                "f32" => "float",
                "f64" => "double",
                other => unreachable!("scalar {other}"),
            };
            match p.pointer {
                None => scalar.to_string(),
                Some(Mutability::Const) => format!("const {scalar}*"),
                Some(Mutability::Mut) => format!("{scalar}*"),
            }
        };
        let params: Vec<String> = k.params.iter().map(c_type).collect();
        let args: Vec<String> = k
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| match p.pointer {
                None => format!("*static_cast<const {}*>(a[{i}])", c_type(p)),
                Some(_) => format!(
                    "reinterpret_cast<{}>(*static_cast<const unsigned long long*>(a[{i}]))",
                    c_type(p)
                ),
            })
            .collect();
        let letters: String = k
            .params
            .iter()
            .map(|p| match (p.pointer, p.scalar) {
                (Some(_), _) => 'p',
                (None, "i64") => 'l',
                (None, "i32") => 'i',
                (None, "u32") => 'u',
                (None, "f32") => 'f',
                (None, _) => 'd',
            })
            .collect();
        writeln!(
            decls,
            "extern \"C\" void {name}({params});\n\
             static void run_{name}(void* const* a) {{ {name}({args}); }}",
            name = k.name,
            params = params.join(", "),
            args = args.join(", "),
        )
        .unwrap();
        writeln!(rows, "    {{\"{0}\", \"{letters}\", run_{0}}},", k.name).unwrap();
    }
    format!(
        "// Written by build.rs from the kernels' parameter lists.\n\
         #include \"dispatch.h\"\n#include <cstring>\n\n{decls}\n\
         static const cpu_kernel KERNELS[] = {{\n{rows}}};\n\n\
         const cpu_kernel* cpu_kernel_named(const char* name) {{\n    \
             for (const cpu_kernel& k : KERNELS) {{\n        \
                 if (std::strcmp(k.name, name) == 0) return &k;\n    \
             }}\n    \
             return nullptr;\n\
         }}\n"
    )
}

/// One `extern "C" __global__` kernel: its file, name and parameters.
struct Kernel {
    file: String,
    name: String,
    params: Vec<Param>,
}

struct Param {
    name: String,
    /// The Rust scalar type: `i64`, `i32`, `u32`, `f32`, `f64`.
    scalar: &'static str,
    pointer: Option<Mutability>,
}

impl Kernel {
    /// Each parameter written by `f` (given its Rust scalar type), joined
    /// by commas.
    fn render(&self, f: impl Fn(&Param, &str) -> String) -> String {
        let parts: Vec<String> = self.params.iter().map(|p| f(p, p.scalar)).collect();
        parts.join(", ")
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mutability {
    Const,
    Mut,
}

fn find_cu(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            find_cu(&path, found);
        } else if path.extension().is_some_and(|e| e == "cu") {
            found.push(path);
        }
    }
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (a C++ compiler is needed: set CXX)"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{cmd:?} failed:\n{stderr}");
    // The compiler's warnings, shown by cargo.
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("cargo:warning={line}");
    }
    output.stdout
}

fn compile(cxx: &str, shim: &Path, src: &Path, obj: &Path) -> PathBuf {
    let mut cmd = Command::new(cxx);
    cmd.args(["-std=c++17", "-O2", "-fPIC", "-Wall"]);
    // Strict in CI (which sets CI); elsewhere another compiler's new
    // warning is shown, not fatal.
    if std::env::var_os("CI").is_some() {
        cmd.arg("-Werror");
    }
    run(cmd
        .args(["-x", "c++"])
        .arg("-include")
        .arg(shim)
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(obj));
    obj.to_path_buf()
}

/// The source with its macros expanded (`GRID_STRIDE`, `UNARY`, ...) and
/// CUDA's keywords left as written.
fn preprocess(cxx: &str, src: &Path) -> String {
    String::from_utf8(run(Command::new(cxx)
        .args(["-E", "-P", "-x", "c++"])
        .arg(src)))
    .expect("UTF-8 source")
}

/// Every `extern "C" __global__ void name(params)` of preprocessed text.
fn kernels_of(text: &str) -> Vec<(String, Vec<Param>)> {
    const MARK: &str = "extern \"C\" __global__ void";
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        rest = &rest[at + MARK.len()..];
        let open = rest.find('(').expect("a kernel's parameter list");
        let close = rest.find(')').expect("a kernel's parameter list");
        let name = rest[..open].trim().to_string();
        let params = rest[open + 1..close]
            .split(',')
            .map(|p| param(&name, p))
            .collect();
        found.push((name, params));
        rest = &rest[close..];
    }
    found
}

fn param(kernel: &str, text: &str) -> Param {
    let spaced = text.replace('*', " * ");
    let mut tokens: Vec<&str> = spaced.split_whitespace().collect();
    let name = tokens.pop().expect("a parameter name").to_string();
    let pointer = tokens.contains(&"*").then(|| {
        if tokens.contains(&"const") {
            Mutability::Const
        } else {
            Mutability::Mut
        }
    });
    tokens.retain(|t| *t != "*" && *t != "const");
    let scalar = match tokens.join(" ").as_str() {
        "long long" => "i64",
        "int" => "i32",
        "unsigned int" => "u32",
        "float" => "f32",
        "double" => "f64",
        other => panic!("kernel {kernel}: parameter `{text}` has type `{other}`, unknown here"),
    };
    Param {
        name,
        scalar,
        pointer,
    }
}

fn bindings(kernels: &[Kernel]) -> String {
    let mut raw = String::new();
    let mut launchers = String::new();
    let mut list = String::new();
    for k in kernels {
        // The extern declaration's parameters, the launcher's, and how the
        // launcher passes each on.
        let raw_params = k.render(|p, t| match p.pointer {
            None => format!("{}: {t}", p.name),
            Some(Mutability::Const) => format!("{}: *const {t}", p.name),
            Some(Mutability::Mut) => format!("{}: *mut {t}", p.name),
        });
        let params = k.render(|p, t| match p.pointer {
            None => format!("{}: {t}", p.name),
            Some(Mutability::Const) => format!("{}: &[{t}]", p.name),
            Some(Mutability::Mut) => format!("{}: &mut [{t}]", p.name),
        });
        let args = k.render(|p, _| match p.pointer {
            None => p.name.clone(),
            Some(Mutability::Const) => format!("{}.as_ptr()", p.name),
            Some(Mutability::Mut) => format!("{}.as_mut_ptr()", p.name),
        });
        writeln!(raw, "        pub fn {}({});", k.name, raw_params).unwrap();
        write!(
            launchers,
            "/// `{name}` of `{file}`, every thread of the grid that \
             `launch_config(threads)` gives, one after another.\n\
             ///\n/// # Safety\n/// The slices must hold every element the \
             kernel reads or writes for these sizes, as on the GPU.\n\
             #[allow(clippy::too_many_arguments)]\n\
             pub unsafe fn {name}(threads: usize, {params}) {{\n    \
                 crate::launch(threads, || {{\n        \
                     // SAFETY: the caller's contract.\n        \
                     unsafe {{ raw::{name}({args}) }}\n    \
                 }});\n\
             }}\n\n",
            name = k.name,
            file = k.file,
            params = params,
            args = args,
        )
        .unwrap();
        writeln!(
            list,
            "    crate::Kernel {{ file: {:?}, name: {:?} }},",
            k.file, k.name
        )
        .unwrap();
    }
    format!(
        "mod raw {{\n    unsafe extern \"C\" {{\n{raw}    }}\n}}\n\n{launchers}\
         /// Every kernel of every `.cu` file, as compiled here.\n\
         pub const KERNELS: &[crate::Kernel] = &[\n{list}];\n"
    )
}
