// A step never returns a secret: its result is written to the journal, so a token stays inside the
// step that uses it.

use eve_tools::prelude::*;
use eve_tools::secret::Token;

#[step]
async fn sign_in(ctx: &StepCtx) -> Result<Token, StepError> {
    Ok(Token::chosen(ctx.idempotency_key()))
}

fn main() {}
