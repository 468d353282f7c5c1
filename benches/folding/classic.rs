//! A classic multi-tool agent doing the same work as the replay: a full tool catalog in
//! every request (the core tools of Claude Code and Codex: Read, Write, Edit, MultiEdit,
//! Bash, Grep, Glob, LS, TodoWrite, WebFetch, NotebookEdit, Task), whole-file reads,
//! `str_replace`-style edits and the conversation kept whole. Its requests are sent as a
//! separate stream through the same fake provider, cache model and tokenizer.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::cache_model::{PrefixCache, Usage};
use super::fake_provider::{FakeProvider, Reply};
use super::replay::{module_source, target, LIFETIME_SECS};
use vis::providers::ProviderKind;

const SYSTEM: &str = "You are an interactive coding agent that helps users with software engineering tasks in their repository. Use the instructions below and the tools available to you to assist the user.\n\nTone: be concise and direct. Answer in fewer than four lines unless the user asks for detail. Do not add preamble or postamble. When you run a non-trivial command, explain what it does.\n\nFollowing conventions: before changing a file, read it and understand its conventions; mimic the code style, use existing libraries and utilities, and follow existing patterns. Never assume a library is available. Never introduce code that exposes or logs secrets.\n\nDoing tasks: use the search tools to understand the codebase and the query; implement the solution using all tools available; verify the solution with the project's tests; run the lint and typecheck commands if they exist. Never commit changes unless the user asks.\n\nTool usage policy: prefer the dedicated tools over shell commands for reading, searching and editing files. You can call multiple tools in a single response when they are independent. Use the TodoWrite tool to plan multi-step tasks and mark each step done as soon as it is finished.\n\nCode references: when referencing specific functions or pieces of code include the pattern file_path:line_number so the user can navigate to the source.";

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
        "additionalProperties": false}}})
}

fn catalog() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    let n = |d: &str| json!({"type": "number", "description": d});
    let b = |d: &str| json!({"type": "boolean", "description": d});
    json!([
        tool("Read", "Reads a file from the local filesystem. You can access any file directly by using this tool. The file_path parameter must be an absolute path, not a relative path. By default, it reads up to 2000 lines starting from the beginning of the file. You can optionally specify a line offset and limit (especially handy for long files), but it's recommended to read the whole file by not providing these parameters. Any lines longer than 2000 characters will be truncated. Results are returned using cat -n format, with line numbers starting at 1. This tool can read images, PDFs and Jupyter notebooks. You can call multiple tools in a single response; it is always better to speculatively read multiple files as a batch that are potentially useful. If you read a file that exists but has empty contents you will receive a system reminder warning in place of file contents.",
            json!({"file_path": s("The absolute path to the file to read"), "offset": n("The line number to start reading from. Only provide if the file is too large to read at once"), "limit": n("The number of lines to read. Only provide if the file is too large to read at once.")}), &["file_path"]),
        tool("Write", "Writes a file to the local filesystem. This tool will overwrite the existing file if there is one at the provided path. If this is an existing file, you MUST use the Read tool first to read the file's contents; this tool will fail if you did not read the file first. ALWAYS prefer editing existing files in the codebase. NEVER write new files unless explicitly required. NEVER proactively create documentation files (*.md) or README files. Only use emojis if the user explicitly requests it.",
            json!({"file_path": s("The absolute path to the file to write (must be absolute, not relative)"), "content": s("The content to write to the file")}), &["file_path", "content"]),
        tool("Edit", "Performs exact string replacements in files. You must use your Read tool at least once in the conversation before editing; this tool will error if you attempt an edit without reading the file. When editing text from Read tool output, ensure you preserve the exact indentation (tabs/spaces) as it appears AFTER the line number prefix; the line number prefix format is: spaces + line number + tab, and everything after that tab is the actual file content to match. Never include any part of the line number prefix in old_string or new_string. ALWAYS prefer editing existing files. The edit will FAIL if old_string is not unique in the file: either provide a larger string with more surrounding context to make it unique or use replace_all to change every instance of old_string. Use replace_all for replacing and renaming strings across the file.",
            json!({"file_path": s("The absolute path to the file to modify"), "old_string": s("The text to replace"), "new_string": s("The text to replace it with (must be different from old_string)"), "replace_all": b("Replace all occurences of old_string (default false)")}), &["file_path", "old_string", "new_string"]),
        tool("MultiEdit", "This is a tool for making multiple edits to a single file in one operation. It is built on top of the Edit tool and allows you to perform multiple find-and-replace operations efficiently. Prefer this tool over the Edit tool when you need to make multiple edits to the same file. All edits are applied in sequence, in the order they are provided; each edit operates on the result of the previous edit; all edits must be valid for the operation to succeed: if any edit fails, none will be applied. Plan your edits carefully to avoid conflicts between sequential operations.",
            json!({"file_path": s("The absolute path to the file to modify"), "edits": {"type": "array", "minItems": 1, "description": "Array of edit operations to perform sequentially on the file", "items": {"type": "object", "properties": {"old_string": s("The text to replace"), "new_string": s("The text to replace it with"), "replace_all": b("Replace all occurences of old_string (default false).")}, "required": ["old_string", "new_string"]}}}), &["file_path", "edits"]),
        tool("Bash", "Executes a given bash command in a persistent shell session with optional timeout, ensuring proper handling and security measures. Before executing the command: if the command will create new directories or files, first use LS to verify the parent directory exists and is the correct location. Always quote file paths that contain spaces with double quotes. The command argument is required. You can specify an optional timeout in milliseconds (up to 600000ms / 10 minutes); if not specified, commands will timeout after 120000ms (2 minutes). It is very helpful if you write a clear, concise description of what this command does in 5-10 words. If the output exceeds 30000 characters, output will be truncated before being returned to you. You MUST avoid using search commands like find and grep; instead use Grep, Glob, or Task to search. You MUST avoid read tools like cat, head, tail, and ls, and use Read and LS to read files. When issuing multiple commands, use the ';' or '&&' operator to separate them. Try to maintain your current working directory throughout the session by using absolute paths and avoiding usage of cd. When the user asks you to create a new git commit, run git status, git diff and git log in parallel first, then draft a concise commit message that focuses on the why rather than the what, and never update the git config or push to the remote repository unless the user explicitly asks you to.",
            json!({"command": s("The command to execute"), "timeout": n("Optional timeout in milliseconds (max 600000)"), "description": s("Clear, concise description of what this command does in 5-10 words.")}), &["command"]),
        tool("Grep", "A powerful search tool built on ripgrep. ALWAYS use Grep for search tasks; NEVER invoke grep or rg as a Bash command. Supports full regex syntax (e.g. \"log.*Error\", \"function\\s+\\w+\"). Filter files with the glob parameter (e.g. \"*.js\", \"**/*.tsx\") or the type parameter (e.g. \"js\", \"py\", \"rust\"). Output modes: \"content\" shows matching lines, \"files_with_matches\" shows only file paths (default), \"count\" shows match counts. Use the Task tool for open-ended searches requiring multiple rounds. Pattern syntax uses ripgrep (not grep): literal braces need escaping. Multiline matching: by default patterns match within single lines only; for cross-line patterns use multiline: true.",
            json!({"pattern": s("The regular expression pattern to search for in file contents"), "path": s("File or directory to search in (rg PATH). Defaults to current working directory."), "glob": s("Glob pattern to filter files (e.g. \"*.js\", \"*.{ts,tsx}\") - maps to rg --glob"), "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "Output mode: \"content\" shows matching lines (supports -A/-B/-C context, -n line numbers, head_limit), \"files_with_matches\" shows file paths (supports head_limit), \"count\" shows match counts (supports head_limit). Defaults to \"files_with_matches\"."}, "-B": n("Number of lines to show before each match (rg -B). Requires output_mode: \"content\", ignored otherwise."), "-A": n("Number of lines to show after each match (rg -A). Requires output_mode: \"content\", ignored otherwise."), "-C": n("Number of lines to show before and after each match (rg -C). Requires output_mode: \"content\", ignored otherwise."), "-n": b("Show line numbers in output (rg -n). Requires output_mode: \"content\", ignored otherwise."), "-i": b("Case insensitive search (rg -i)"), "type": s("File type to search (rg --type). Common types: js, py, rust, go, java, etc. More efficient than include for standard file types."), "head_limit": n("Limit output to first N lines/entries, equivalent to \"| head -N\"."), "multiline": b("Enable multiline mode where . matches newlines and patterns can span lines (rg -U --multiline-dotall). Default: false.")}), &["pattern"]),
        tool("Glob", "Fast file pattern matching tool that works with any codebase size. Supports glob patterns like \"**/*.js\" or \"src/**/*.ts\". Returns matching file paths sorted by modification time. Use this tool when you need to find files by name patterns. When you are doing an open ended search that may require multiple rounds of globbing and grepping, use the Task tool instead. You can call multiple tools in a single response; it is always better to speculatively perform multiple searches as a batch that are potentially useful.",
            json!({"pattern": s("The glob pattern to match files against"), "path": s("The directory to search in. If not specified, the current working directory will be used. IMPORTANT: Omit this field to use the default directory. Must be a valid directory path if provided.")}), &["pattern"]),
        tool("LS", "Lists files and directories in a given path. The path parameter must be an absolute path, not a relative path. You can optionally provide an array of glob patterns to ignore with the ignore parameter. You should generally prefer the Glob and Grep tools, if you know which directories to search.",
            json!({"path": s("The absolute path to the directory to list (must be absolute, not relative)"), "ignore": {"type": "array", "items": {"type": "string"}, "description": "List of glob patterns to ignore"}}), &["path"]),
        tool("TodoWrite", "Use this tool to create and manage a structured task list for your current coding session. This helps you track progress, organize complex tasks, and demonstrate thoroughness to the user. Use it proactively for complex multi-step tasks (three or more distinct steps), when the user provides multiple tasks, after receiving new instructions, and after completing a task (mark it completed and add any new follow-up tasks). Skip it for a single straightforward task. Task states: pending, in_progress (limit to one at a time), completed. Mark tasks complete IMMEDIATELY after finishing; only mark a task completed when you have fully accomplished it: if tests are failing or the implementation is partial, keep it in_progress.",
            json!({"todos": {"type": "array", "description": "The updated todo list", "items": {"type": "object", "properties": {"content": {"type": "string", "minLength": 1}, "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}, "id": {"type": "string"}}, "required": ["content", "status", "id"]}}}), &["todos"]),
        tool("WebFetch", "Fetches content from a specified URL and processes it using an AI model. Takes a URL and a prompt as input, fetches the URL content, converts HTML to markdown, and processes the content with the prompt using a small, fast model. Use this tool when you need to retrieve and analyze web content. The URL must be a fully-formed valid URL; HTTP URLs will be automatically upgraded to HTTPS. This tool is read-only and does not modify any files. Results may be summarized if the content is very large. Includes a self-cleaning 15-minute cache for faster responses when repeatedly accessing the same URL.",
            json!({"url": s("The URL to fetch content from"), "prompt": s("The prompt to run on the fetched content")}), &["url", "prompt"]),
        tool("NotebookEdit", "Completely replaces the contents of a specific cell in a Jupyter notebook (.ipynb file) with new source. Jupyter notebooks are interactive documents that combine code, text, and visualizations, commonly used for data analysis and scientific computing. The notebook_path parameter must be an absolute path, not a relative path. The cell_number is 0-indexed. Use edit_mode=insert to add a new cell at the index specified by cell_number. Use edit_mode=delete to delete the cell at the index specified by cell_number.",
            json!({"notebook_path": s("The absolute path to the Jupyter notebook file to edit"), "cell_id": s("The ID of the cell to edit."), "new_source": s("The new source for the cell"), "cell_type": {"type": "string", "enum": ["code", "markdown"], "description": "The type of the cell (code or markdown)."}, "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"], "description": "The type of edit to make (replace, insert, delete). Defaults to replace."}}), &["notebook_path", "new_source"]),
        tool("Task", "Launch a new agent to handle complex, multi-step tasks autonomously. Available agent types: general-purpose (researching complex questions, searching for code, and executing multi-step tasks). When you are searching for a keyword or file and are not confident that you will find the right match in the first few tries, use this agent to perform the search for you. When NOT to use it: to read a specific file path (use Read or Glob), to search for a specific class definition (use Glob), or to search code within a specific file or set of 2-3 files (use Read). Launch multiple agents concurrently whenever possible. When the agent is done, it will return a single message back to you; the result returned by the agent is not visible to the user. Each agent invocation is stateless. Clearly tell the agent whether you expect it to write code or just to do research.",
            json!({"description": s("A short (3-5 word) description of the task"), "prompt": s("The task for the agent to perform"), "subagent_type": s("The type of specialized agent to use for this task")}), &["description", "prompt", "subagent_type"]),
    ])
}

/// One turn's tool calls and their results, as the classic agent would get them.
fn turn_steps(t: usize, sources: &mut [String]) -> Vec<(&'static str, Value, String)> {
    let (m, f) = target(t);
    let path = format!("/ws/pkg/m{m}.py");
    let numbered = |src: &str| -> String {
        src.lines()
            .enumerate()
            .map(|(i, l)| format!("{:>6}\t{l}\n", i + 1))
            .collect()
    };
    let read = numbered(&sources[m]);
    let grep: String = sources[m]
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("total"))
        .map(|(i, l)| format!("{path}:{}:{l}\n", i + 1))
        .collect();
    let old = format!("    total = 0\n    for item in items[:{f}]:");
    let new = format!("    total = 0  # accumulator\n    for item in items[:{f}]:");
    sources[m] = sources[m].replacen(&old, &new, 1);
    let at = sources[m]
        .lines()
        .position(|l| l.contains("# accumulator") && !l.is_empty())
        .unwrap_or(0);
    let snippet: String = sources[m]
        .lines()
        .enumerate()
        .skip(at.saturating_sub(4))
        .take(9)
        .map(|(i, l)| format!("{:>6}\t{l}\n", i + 1))
        .collect();
    vec![
        ("Read", json!({"file_path": path}), read),
        (
            "Grep",
            json!({"pattern": "total", "path": path, "output_mode": "content", "-n": true}),
            grep,
        ),
        (
            "Edit",
            json!({"file_path": path, "old_string": old, "new_string": new}),
            format!("The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{snippet}"),
        ),
        (
            "Bash",
            json!({"command": format!("python3 -m pytest -q tests/test_m{m}.py"), "description": "Run the module's tests"}),
            format!("{}{}[100%]\n{} passed in 0.02s\n", ".".repeat(super::replay::FUNCTIONS), " ".repeat(60), super::replay::FUNCTIONS),
        ),
    ]
}

/// Replays `turns` turns of the classic agent: per request, input and cached tokens.
pub fn replay(rt: &tokio::runtime::Runtime, turns: usize) -> (Vec<Usage>, u64) {
    let fake = FakeProvider::start();
    let cache = Arc::new(Mutex::new((
        PrefixCache::new(LIFETIME_SECS as f64),
        Vec::new(),
    )));
    let c = cache.clone();
    fake.respond_with(move |req| {
        let mut c = c.lock().unwrap();
        let usage = c.0.request(&req.body);
        c.1.push(usage);
        Reply::openai().text("ok").build()
    });
    let tools = catalog().to_string();
    let head =
        format!("{{\"model\":\"fake-model\",\"stream\":true,\"tools\":{tools},\"messages\":[");
    let prefix_tokens = vis::catalog::count_tokens(&format!("{SYSTEM}{tools}")).unwrap() as u64;
    let mut messages = vec![json!({"role": "system", "content": SYSTEM}).to_string()];
    let mut sources: Vec<String> = (0..super::replay::MODULES).map(module_source).collect();
    let url = format!("{}/chat/completions", fake.base_url(ProviderKind::OpenAi));
    // reqwest is built without a default TLS crypto provider (as in `providers::client`).
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let client = reqwest::Client::new();
    let send = |messages: &[String]| {
        let body = format!("{head}{}]}}", messages.join(","));
        rt.block_on(async {
            client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
        });
    };
    for t in 1..=turns {
        messages.push(
            json!({"role": "user", "content": format!("Rename the accumulator in the next function (turn {t}).")})
                .to_string(),
        );
        for (k, (name, args, result)) in turn_steps(t, &mut sources).into_iter().enumerate() {
            send(&messages);
            let id = format!("call_{t}_{k}");
            messages.push(json!({"role": "assistant", "content": format!("Step {}.", k + 1),
                "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}).to_string());
            messages
                .push(json!({"role": "tool", "tool_call_id": id, "content": result}).to_string());
        }
        send(&messages);
        messages.push(
            json!({"role": "assistant", "content": "Done: the change is in and the tests pass."})
                .to_string(),
        );
    }
    let usages = std::mem::take(&mut cache.lock().unwrap().1);
    (usages, prefix_tokens)
}
