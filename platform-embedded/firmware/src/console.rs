//! The semihosting console: lines to the host's stdout, and the exit status
//! QEMU returns (with `-semihosting-config enable=on,target=native`).

pub use cortex_m_semihosting::hprintln as println;

/// Ends the program: QEMU exits with status 0 if `ok`, else 1.
pub fn exit(ok: bool) -> ! {
    use cortex_m_semihosting::debug;
    debug::exit(if ok {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Not reached under QEMU; on hardware without a debugger, stop here.
    loop {
        cortex_m::asm::wfi();
    }
}

/// A panic prints its message and exits 1, so a test run fails loudly.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    println!("panic: {}", info);
    exit(false)
}
