use clap::Parser;

fn main() {
    let cli = vis::cli::Cli::parse();
    let code = match vis::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    };
    std::process::exit(code);
}
