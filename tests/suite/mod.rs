mod bash;
mod crash;
mod file_tools;
mod initialize;
mod protocol;
mod read_ls;
mod tools_list;
