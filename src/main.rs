mod allocator;

#[global_allocator]
static ALLOCATOR: allocator::Switching = allocator::Switching;

fn main() -> std::process::ExitCode {
    warden_cli::main_with(warden_cli::Host {
        serving: allocator::use_mimalloc,
    })
}
