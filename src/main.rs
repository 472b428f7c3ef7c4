fn main() {
    println!("lmzip");
}
