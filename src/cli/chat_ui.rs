//! The interactive `vis chat` program.

use std::io::BufRead;
use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::chat::{open_session, ChatArgs};
use super::term::escape_controls;
use super::CliError;

/// Reads messages line by line and runs each as a turn.
pub async fn run(args: ChatArgs, db: PathBuf) -> Result<i32, CliError> {
    let (mut session, notes) = open_session(&args, &db)?;
    for note in notes {
        eprintln!("{}", escape_controls(&note));
    }
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let printer = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let crate::protocol::Event::TextDelta { text } = event {
                    print!("{}", escape_controls(&text));
                }
            }
            println!();
        });
        let result = session.run_turn(&line, &tx, &stop).await;
        drop(tx);
        let _ = printer.await;
        if let Err(e) = result {
            eprintln!("vis chat: {e}");
        }
    }
    session.shutdown().await;
    Ok(0)
}
