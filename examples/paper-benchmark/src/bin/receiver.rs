//! The receiver loop of the paper's Figure 4-2, on the tagwire API: receive on the
//! *data* tag and acknowledge each message on the *ack* tag, until "quit".

use tagwire::{Client, Domain, SubscribeOptions};

fn main() -> anyhow::Result<()> {
    let tw = Client::connect()?;
    tw.create_tag("/paper/data", Domain::Global)?;
    tw.create_tag("/paper/ack", Domain::Global)?;
    let mut data = tw.subscribe("/paper/data", SubscribeOptions::default())?;
    let mut ack = tw.publisher("/paper/ack")?;
    let mut n = 0u64;
    loop {
        let m = data.receive(None)?;
        if m.payload == b"quit" {
            break;
        }
        ack.send(b"ack")?;
        n += 1;
    }
    println!("acknowledged {n} messages");
    Ok(())
}
