use clap::Parser;

fn main() {
    let cli = vis::cli::Cli::parse();
    let code = match vis::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            // The one line that names the cause and the fix.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("{e}");
            }
            e.code
        }
    };
    std::process::exit(code);
}
