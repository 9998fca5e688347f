package org.example.shapes;

public final class Circle implements Shape {
    private final double r;

    public Circle(double r) {
        this.r = r;
    }

    double radius() {
        return r;
    }

    @Override
    public double area() {
        double x = radius();
        return Math.PI * x * x;
    }

    @Override
    public double perimeter() {
        return 2 * Math.PI * radius();
    }
}
