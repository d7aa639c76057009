#[tokio::main]
async fn main() -> std::process::ExitCode {
    eve_tools::cli::Host::from_env().main(eve_tools::tools!(my_tools)).await
}
