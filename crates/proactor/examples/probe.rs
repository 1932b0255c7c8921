//! Prints what this kernel's io_uring accepts: the setup flags that were
//! taken (or refused), the feature bits, the ring sizes and the opcodes.
//!
//! `cargo run -p proactor --example probe`

fn main() {
    match proactor::Proactor::new() {
        Ok(p) => println!("{}", p.describe()),
        Err(e) => {
            eprintln!("io_uring unavailable: {e}");
            std::process::exit(2);
        }
    }
}
