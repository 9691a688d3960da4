module dac/goagent

go 1.19
