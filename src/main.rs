fn main() {
    std::process::exit(vis::cli::main());
}
