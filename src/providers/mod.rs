//! Model providers: encoding the conversation as each provider's request body.

pub mod anthropic_request;
pub mod openai_request;
