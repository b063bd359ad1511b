import CFAAD2
